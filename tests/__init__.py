"""The test suite; tests/<package>/ holds the tests of src/vnc_use/<package>/."""
