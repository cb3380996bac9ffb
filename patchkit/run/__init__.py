"""The run stage: the pipeline (fetch -> apply -> build -> the registry's steps), its lanes, the step
registry, the timeline, `--changed` scope and replay of raw logs."""
