"""Test support: real broker processes, a frame-capturing proxy and helpers shared by the compat tests."""
