"""Array backends. CPU arrays are numpy's; ``special`` holds vectorised special functions."""
