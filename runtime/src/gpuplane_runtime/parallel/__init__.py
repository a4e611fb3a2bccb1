"""How a split model runs: tensor and sequence parallelism (:mod:`.tensor`), data parallelism by ZeRO stage
(:mod:`.data`) and the pipeline schedules (:mod:`.pipeline`)."""
