"""padding ops."""
