#!/bin/bash
# The search goldens' throughput, MFU, time breakdown and exposed communication against
# published closed forms (testdata/search_closed_form_check.py says which).
exec /usr/bin/python3 testdata/search_closed_form_check.py testdata/search
