"""Lessons: errors met, how they were fixed, and how often the fix worked."""
