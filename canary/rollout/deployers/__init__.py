"""The deployers: the embedded local cluster (`local`), containers on a Docker engine (`docker`)."""
