#!/bin/bash
# The plan search goldens' throughput, MFU and time breakdown against published closed
# forms (testdata/search_closed_form_check.py says which).
exec /usr/bin/python3 testdata/search_closed_form_check.py testdata/search
