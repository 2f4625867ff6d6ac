from perceptforge.cli import app

app(prog_name="perceptforge")
