"""Process safety: the tracker of every stdio server's process tree, the one kill ladder, the PID
ledger of crashed runs and the reaper sidecar that outlives a crashed host.
"""
