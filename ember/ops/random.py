"""random ops."""
