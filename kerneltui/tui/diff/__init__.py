"""The diff screen: two traces side by side (`kerneltui diff A B`)."""
