"""The campaign folder: its paths, its manifest, the run-state vocabulary and a read-only view
of its store. Standard library only; every other package asks this one about campaign files."""
