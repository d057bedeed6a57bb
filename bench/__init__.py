"""Benchmarks against the peers (CasADi, SymPy): python -m bench"""
