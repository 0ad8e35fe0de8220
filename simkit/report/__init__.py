"""What `simkit predict` prints for a capacity planner: the assumptions block, the column legend,
the one-line recommendation, and the table / JSON / CSV / HTML renderings of one Prediction.

Every rendering is built from the same three pieces (assumptions.build_assumptions,
legend.COLUMNS, recommend.recommendation), so the formats cannot drift apart. No rendering
carries a timestamp: the same inputs and seeds give byte-identical output.
"""
