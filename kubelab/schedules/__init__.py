"""Schedules: experiments, sweeps and pipelines that run on a timetable."""
