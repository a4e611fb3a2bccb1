"""Models the runtime builds and splits: the decoder families (:mod:`.families`), a stage of one
(:mod:`.stage`), and building one on the meta device from a checkpoint or a config (:mod:`.build`)."""
