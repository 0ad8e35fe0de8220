"""The application layer: predict, sweep and the loading of what they run on (simkit.app.cells),
over the simulator (simkit.engine); commands, what-ifs, validation and the reference study call it.
"""
