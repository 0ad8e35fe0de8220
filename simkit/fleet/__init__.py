"""A fleet of vLLM replicas behind a router: which replica serves which request (issue: fleet)."""
