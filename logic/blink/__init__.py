"""The BLINK-style family's pure logic: its task templates (``templates``), what a task needs of its sources
(``needs``), the builders that make an item (``build``) and how each task draws its answer and distractors
(``answers``)."""
