"""Holds the module that health checks are collected from."""
