"""Rootline's correlation engine: pure Python, no Django.

Plain frozen dataclasses in, plain frozen dataclasses out, so the engine is fast, testable without
a database and usable from a notebook. The Django app turns rows into these inputs and persists
the outputs.
"""
