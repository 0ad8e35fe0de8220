"""Where sweeps run: local processes (simkit.app.sweep, the default) or a Ray cluster
(`ray_sweep.sweep_ray`, optional extra `simkit[ray]`)."""
