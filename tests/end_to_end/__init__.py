"""Whole journeys: the command line, the README run as written, a new user's first hour, bad
input and interruptions on real processes, and the real datasets in ../shared/data."""
