"""nn_ops ops."""
