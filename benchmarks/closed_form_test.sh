#!/bin/bash
# Predicted figures of the generated sim tables against closed forms and published
# measurements (benchmarks/closed_form_check.py says which and why).
exec /usr/bin/python3 benchmarks/closed_form_check.py benchmarks
