"""A model's weights in and out: safetensors read a box at a time (:mod:`.safetensors_io`), where a parameter
comes from (:mod:`.names`, :mod:`.sources`), filling this rank's shards (:mod:`.loading`) and exporting Hugging
Face files (:mod:`.export`)."""
