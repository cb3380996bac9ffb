"""Comparisons, computed once outside the rendering: the report (patchkit.report) shows what these
compute. `occupancy_predict`: the occupancy a kernel would have on a target GPU, from the compile checks'
ptxas figures (predicted, never measured); `attribution`: a patch's ratio and verdict between the prefixes
of the series without and with it (the stored ratio against base, or one computed from the samples)."""
