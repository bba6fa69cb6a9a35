# Lets the tests import their helper modules (models.py) by plain name.
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
