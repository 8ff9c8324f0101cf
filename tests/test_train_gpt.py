"""The main job's GPT: the same file, loaded once per library, trained 8 steps from the same
weights gives the same losses; and the script runs end to end (checkpoint, plot, sample)."""

import numpy as np
import pytest
import torch

import ember
import ember.examples.train_gpt as demo



def load(backend: str):
    from ember.examples import load as load_example
    return load_example("train_gpt", backend)


def test_gpt_trains_like_torch():
    te, tt = load("ember"), load("torch")
    assert te.torch is ember and tt.torch is torch
    torch.manual_seed(0)
    model_t = tt.GPT(vocab=20, block=16, n_layer=2, n_head=2, d=32).double()
    model_e = te.GPT(vocab=20, block=16, n_layer=2, n_head=2, d=32).double()
    model_e.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy())
                             for k, v in model_t.state_dict().items()})
    assert model_e.head.weight is model_e.tok.weight  # still tied after loading
    opts = [lib.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.1)
            for lib, m in ((ember, model_e), (torch, model_t))]
    rng = np.random.default_rng(0)
    losses = {"ember": [], "torch": []}
    for _ in range(8):
        ids = rng.integers(0, 20, (4, 17))
        for name, lib, model, opt in (("ember", ember, model_e, opts[0]),
                                      ("torch", torch, model_t, opts[1])):
            x = lib.from_numpy(ids[:, :-1].copy())
            y = lib.from_numpy(ids[:, 1:].copy())
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses[name].append(loss.item())
    np.testing.assert_allclose(losses["ember"], losses["torch"], rtol=1e-4)
    assert losses["ember"][-1] < losses["ember"][0]


def test_script_runs_end_to_end(tmp_path, capsys):
    text = tmp_path / "tiny.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 200)
    out = tmp_path / "run"
    result = demo.main(["--data", str(text), "--steps", "6", "--batch-size", "4", "--block",
                        "16", "--n-layer", "1", "--n-embd", "32", "--eval-every", "3",
                        "--eval-batches", "2", "--sample-chars", "20", "--no-progress",
                        "--out", str(out)])
    printed = capsys.readouterr().out
    assert "unigram baseline" in printed and "sample:" in printed
    assert (out / "model.pt").exists() and (out / "loss.png").stat().st_size > 1000
    ck = ember.load(out / "model.pt")
    assert ck["step"] == 6 and "tok.weight" in ck["model"]
    assert torch.load(out / "model.pt")["model"]["tok.weight"].shape[1] == 32  # torch reads it
    assert np.isfinite(result["val"]) and result["baseline"] > 0


@pytest.mark.parametrize("step,expect", [(0, 3e-3 / 50), (49, 3e-3), (1600, 3e-4)])
def test_learning_rate_schedule(step, expect):
    args = demo.parse([])
    assert demo.lr_at(step, args) == pytest.approx(expect, rel=1e-6, abs=1e-9)
