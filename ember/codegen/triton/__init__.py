"""Triton code generation: the scalar-op spelling and the kernel emitters."""
