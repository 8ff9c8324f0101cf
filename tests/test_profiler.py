"""The profiler (``ember.profiler``, ``ember.autograd.profiler``) and the flop counter
(``ember.utils.flop_counter``), on the CPU, against torch's where they report the same things."""

import json
import os
import warnings

import numpy as np
import pytest
import torch
import torch.profiler as tprof
from torch.utils.flop_counter import FlopCounterMode as TorchFlops

import ember
import ember.profiler as eprof
from ember._dispatch import STATE
from ember.utils.flop_counter import FlopCounterMode as EmberFlops

A = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
LIBS = ((ember, eprof), (torch, tprof))


def program(lib):
    x = lib.tensor(A)
    y = x.sin()
    y = y.sin()
    z = lib.tensor(A[:8, :8]).sin()
    w = x.mm(x)
    x.exp_()
    return y, z, w


def profiled(lib, prof_mod, **kw):
    with prof_mod.profile(activities=[prof_mod.ProfilerActivity.CPU], **kw) as p:
        program(lib)
    return p


def test_op_events_are_named_and_counted_as_torch():
    counts = []
    for lib, pm in LIBS:
        avg = {e.key: e.count for e in profiled(lib, pm).key_averages()}
        counts.append({k: avg.get(k) for k in ("aten::sin", "aten::mm", "aten::exp_")})
    assert counts[0] == counts[1] == {"aten::sin": 3, "aten::mm": 1, "aten::exp_": 1}


def test_input_shapes_and_grouping_as_torch():
    rows = []
    for lib, pm in LIBS:
        avg = profiled(lib, pm, record_shapes=True).key_averages(group_by_input_shape=True)
        rows.append(sorted((e.key, str(e.input_shapes), e.count) for e in avg
                           if e.key in ("aten::sin", "aten::mm")))
    assert rows[0] == rows[1]
    assert ("aten::sin", "[[64, 64]]", 2) in rows[0] and ("aten::sin", "[[8, 8]]", 1) in rows[0]
    with pytest.raises(AssertionError):
        profiled(ember, eprof).key_averages(group_by_input_shape=True)


def test_allocated_bytes_as_torch():
    mem = []
    for lib, pm in LIBS:
        avg = {e.key: e for e in profiled(lib, pm, profile_memory=True).key_averages()}
        mem.append([(avg[k].self_cpu_memory_usage, avg[k].cpu_memory_usage)
                    for k in ("aten::sin", "aten::mm", "aten::exp_")])
    assert mem[0] == mem[1] == [(3 * 16384 - 16384 + 256, 2 * 16384 + 256), (16384, 16384),
                                (0, 0)]


def test_self_and_total_times_nest_under_record_function():
    with eprof.profile() as p:
        with eprof.record_function("outer"):
            x = ember.tensor(A)
            with eprof.record_function("inner"):
                x.sin().cos()
    evs = {e.name: e for e in p.events()}
    outer, inner = evs["outer"], evs["inner"]
    assert inner.cpu_parent is outer and evs["aten::sin"].cpu_parent is inner
    assert outer.cpu_time_total >= inner.cpu_time_total >= \
        evs["aten::sin"].cpu_time_total + evs["aten::cos"].cpu_time_total
    assert inner.self_cpu_time_total == pytest.approx(
        inner.cpu_time_total - evs["aten::sin"].cpu_time_total - evs["aten::cos"].cpu_time_total)
    assert outer.is_user_annotation and not evs["aten::sin"].is_user_annotation


def test_record_function_as_decorator_and_without_profiler():
    @eprof.record_function("step_fn")
    def step(x):
        return x.sin()
    step(ember.tensor(A))  # no profiler: nothing happens
    with eprof.profile() as p:
        step(ember.tensor(A))
    names = [e.name for e in p.events()]
    assert names == ["step_fn", "aten::sin"]
    assert STATE.layers.get("profiler") is None and STATE.top is None  # off again


def test_table_columns_and_units_as_torch():
    for kw, extra in (({}, []), ({"profile_memory": True}, ["CPU Mem", "Self CPU Mem"])):
        heads = []
        for lib, pm in LIBS:
            table = profiled(lib, pm, **kw).key_averages().table(sort_by="cpu_time_total",
                                                                 row_limit=2)
            lines = table.splitlines()
            heads.append(lines[1].split("  "))
            assert len(lines) == 2 + 1 + 2 + 1 + 1  # sep, header, sep, 2 rows, sep, total
            assert lines[-1].startswith("Self CPU time total: ")
        assert [h.strip() for h in heads[0] if h.strip()] == \
            [h.strip() for h in heads[1] if h.strip()]
        assert "Self CPU %" in heads[0][1] or "Self CPU %" in " ".join(heads[0])
        for col in extra:
            assert col in " ".join(heads[0])
    table = profiled(ember, eprof).key_averages().table(sort_by="self_cpu_time_total",
                                                        time_unit="ms")
    rows = table.splitlines()[3:-2]
    assert all(cell.endswith("ms") for r in rows for cell in r.split()[2:3])
    avg = profiled(ember, eprof).key_averages()
    ordered = sorted(avg, key=lambda e: e.count, reverse=True)
    assert avg.table(sort_by="count").splitlines()[3].split()[0] == ordered[0].key


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=2,
                                active=1, repeat=2), dict(wait=3, warmup=1, active=2,
                                skip_first=2, skip_first_wait=1, repeat=1)])
def test_schedule_actions_as_torch(kw):
    e, t = eprof.schedule(**kw), tprof.schedule(**kw)
    assert [e(k).name for k in range(20)] == [t(k).name for k in range(20)]


def test_schedule_errors_as_torch():
    for pm in (eprof, tprof):
        with pytest.raises(AssertionError, match="Invalid profiler schedule arguments. Got "
                                                 "wait=1 .need >= 0., warmup=1 .need >= 0., "
                                                 "active=0 .need > 0.,"):
            pm.schedule(wait=1, warmup=1, active=0)
        with pytest.warns(UserWarning, match="Profiler won't be using warmup"):
            pm.schedule(wait=1, warmup=0, active=1)


def test_scheduled_steps_and_trace_ready_as_torch():
    seen = []
    for lib, pm in LIBS:
        ready = []
        sched = pm.schedule(wait=1, warmup=1, active=2, repeat=2)
        with pm.profile(activities=[pm.ProfilerActivity.CPU], schedule=sched,
                        on_trace_ready=lambda p: ready.append(sorted(
                            e.name for e in p.events() if e.name.startswith("ProfilerStep")
                            or e.name == "aten::sin"))) as p:
            for _ in range(10):
                lib.tensor(A).sin()
                p.step()
        seen.append(ready)
    assert seen[0] == seen[1]
    assert seen[0][0] == ["ProfilerStep*", "ProfilerStep*", "aten::sin", "aten::sin"]


def test_tensorboard_trace_handler_writes_traces(tmp_path):
    d = str(tmp_path / "tb")
    with eprof.profile(schedule=eprof.schedule(wait=0, warmup=1, active=1, repeat=2),
                       on_trace_ready=eprof.tensorboard_trace_handler(d, "w0")) as p:
        for _ in range(5):
            ember.tensor(A).sin()
            p.step()
    files = sorted(os.listdir(d))
    assert len(files) == 2 and all(f.startswith("w0.") and f.endswith(".pt.trace.json")
                                   for f in files)
    json.load(open(os.path.join(d, files[0])))


# ---------------------------------------------------------------------- the Chrome trace
_PHASES = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "i": ("name", "ph", "ts", "pid",
                                                                  "tid", "s"),
           "s": ("ph", "id", "ts", "pid", "tid", "cat", "name"),
           "f": ("ph", "id", "ts", "pid", "tid", "cat", "name")}


def validate_trace(data):
    """The trace-event JSON format: an object with a ``traceEvents`` list whose events carry
    what their phase requires (numbers for times, ids for processes and threads); complete
    events on one thread nest (no partial overlaps)."""
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    assert data.get("displayTimeUnit", "ms") in ("ms", "ns")
    tracks = {}
    for ev in data["traceEvents"]:
        assert ev["ph"] in _PHASES, ev
        for key in _PHASES[ev["ph"]]:
            assert key in ev, (key, ev)
        assert isinstance(ev["ts"], (int, float)) and isinstance(ev["pid"], int) and \
            isinstance(ev["tid"], int)
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
            assert isinstance(ev.get("args", {}), dict)
            tracks.setdefault((ev["pid"], ev["tid"]), []).append(ev)
        if ev["ph"] == "i":
            assert ev["s"] in ("g", "p", "t")
    for evs in tracks.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ = []
        for e in evs:
            while open_ and open_[-1]["ts"] + open_[-1]["dur"] <= e["ts"]:
                open_.pop()
            if open_:
                outer = open_[-1]
                assert e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + 1e-3, (outer, e)
            open_.append(e)
    return tracks


def test_chrome_trace_is_valid_and_nested(tmp_path):
    path = str(tmp_path / "trace.json")
    with eprof.profile(record_shapes=True, profile_memory=True, with_stack=True) as p:
        with eprof.record_function("block"):
            x = ember.tensor(A, requires_grad=True)
            y = x.mm(x).sin().sum()
        y.backward()
    p.export_chrome_trace(path)
    data = json.load(open(path))
    tracks = validate_trace(data)
    (evs,) = tracks.values()
    block = next(e for e in evs if e["name"] == "block")
    assert block["cat"] == "user_annotation"
    inside = [e["name"] for e in evs if e is not block and block["ts"] <= e["ts"] and
              e["ts"] + e["dur"] <= block["ts"] + block["dur"]]
    assert {"aten::mm", "aten::sin", "aten::sum"} <= set(inside)
    mm = next(e for e in evs if e["name"] == "aten::mm")
    assert mm["cat"] == "cpu_op" and mm["args"]["Input Dims"] == [[64, 64], [64, 64]]
    assert any(e["ph"] == "i" and e["args"]["Bytes"] == 16384 for e in data["traceEvents"])
    assert "test_profiler.py" in mm["args"]["Call stack"]
    assert any(e["name"] == "aten::cos" for e in evs)  # the backward's ops are there too


def test_torch_trace_passes_the_same_validation(tmp_path):
    """The validation is the format's, not ember's: torch's own trace passes it too."""
    path = str(tmp_path / "torch.json")
    with tprof.profile(activities=[tprof.ProfilerActivity.CPU]) as p:
        with tprof.record_function("block"):
            torch.tensor(A).mm(torch.tensor(A)).sin()
    p.export_chrome_trace(path)
    data = json.load(open(path))
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("ph") in _PHASES and
                           isinstance(e.get("tid"), int) and isinstance(e.get("pid"), int)]
    validate_trace(data)


def test_with_stack_and_legacy_autograd_profiler():
    with ember.autograd.profiler.profile(with_stack=True, record_shapes=True) as p:
        ember.tensor(A).sin()
    (ev,) = p.function_events
    assert ev.name == "aten::sin" and any("test_profiler.py" in s for s in ev.stack)
    assert "aten::sin" in p.table() and p.key_averages()[0].count == 1
    assert p.self_cpu_time_total == pytest.approx(ev.cpu_time_total)
    with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
        ember.autograd.profiler.profile().key_averages()
    with ember.autograd.profiler.profile() as outer:
        with ember.autograd.profiler.profile() as inner:
            ember.tensor(A).sin()
        ember.tensor(A).cos()
    assert [e.name for e in inner.function_events] == ["aten::sin"]
    assert [e.name for e in outer.function_events] == ["aten::cos"]
    assert STATE.top is None


# ---------------------------------------------------------------------- flop counting
def conv_model(lib):
    nn = lib.nn
    lib.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 4, 3, stride=2, groups=2), nn.Flatten(),
                         nn.Linear(4 * 7 * 7, 10), nn.Linear(10, 5, bias=False))


def flops(lib, counter, fn):
    with counter(display=False) as fc:
        fn()
    counts = {k: sum(v.values()) for k, v in fc.get_flop_counts().items()}
    return fc.get_total_flops(), counts


@pytest.mark.parametrize("case", ["conv_train", "products", "attention"])
def test_flop_counts_as_torch(case):
    got = []
    for lib, counter in ((ember, EmberFlops), (torch, TorchFlops)):
        if case == "conv_train":
            m = conv_model(lib)
            x = lib.randn(2, 3, 16, 16, requires_grad=True)
            got.append(flops(lib, counter, lambda: m(x).sum().backward()))
        elif case == "products":
            a, b = lib.randn(3, 4, 5), lib.randn(3, 5, 6)
            m, v = lib.randn(4, 5), lib.randn(5)

            def run():
                a @ b, a.bmm(b), m.mm(m.T), m @ v, lib.addmm(lib.randn(4, 4), m, m.T)
                lib.baddbmm(lib.randn(3, 4, 6), a, b), lib.randn(2, 3, 4, 5) @ lib.randn(5, 7)
            got.append(flops(lib, counter, run))
        else:
            q, k, v = lib.randn(2, 4, 16, 8), lib.randn(2, 4, 12, 8), lib.randn(2, 4, 12, 6)
            got.append(flops(lib, counter, lambda: lib.nn.functional.
                             scaled_dot_product_attention(q, k, v)))
    assert got[0] == got[1] and got[0][0] > 0


def test_flop_counter_table_and_custom_mapping(capsys):
    x = ember.randn(4, 5)
    with EmberFlops(display=True, custom_mapping={ember.sin: lambda s, out_shape: 7}) as fc:
        conv_model(ember)[4](ember.randn(2, 196))
        x.sin()
    out = capsys.readouterr().out
    assert "Module" in out and "Linear" in out and "aten.linear" in out
    assert fc.get_flop_counts()["Global"][ember.sin] == 7
    assert fc.get_total_flops() == 2 * 2 * 196 * 10 + 7
    assert STATE.top is None


def test_profiler_sees_ops_under_autocast_and_checkpoint():
    with eprof.profile() as p, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = ember.tensor(A, requires_grad=True)
        y = ember.utils.checkpoint.checkpoint(lambda t: t.sin().cos(), x, use_reentrant=False)
        y.sum().backward()
    names = [e.name for e in p.events()]
    assert names.count("aten::sin") == 3  # forward, recomputation, cos's backward


def test_backward_nodes_are_ranges_around_their_ops_as_torch():
    got = []
    for lib, pm in LIBS:
        x = lib.tensor(A, requires_grad=True)
        with pm.profile(activities=[pm.ProfilerActivity.CPU]) as p:
            x.sin().sum().backward()
        evs = p.events()
        node = next(e for e in evs if e.name == "SinBackward0")
        got.append((node.cpu_parent.name, sorted(c.name for c in node.cpu_children)))
    assert got[0] == got[1] == ("autograd::engine::evaluate_function: SinBackward0",
                                ["aten::cos", "aten::mul"])
