"""What each compiled kernel computes, from Inductor's own record (captured by `kerneltui capture`)."""
