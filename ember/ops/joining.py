"""joining ops."""
