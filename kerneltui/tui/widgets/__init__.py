"""Reusable widgets: Timeline, KernelTable, LaunchList, DetailsPane."""
