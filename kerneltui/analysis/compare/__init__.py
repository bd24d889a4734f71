"""Comparing two traces (A, B): same workload?, faster?, where did the time go?, what did torch.compile do?"""
