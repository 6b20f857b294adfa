"""Node pairs: ping and path MTU commands, their pipeline beside the facts."""
