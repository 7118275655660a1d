"""Schedules that overlap communication with compute: DDP buckets, the bucket timeline, its sweep."""
