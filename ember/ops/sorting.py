"""sorting ops."""
