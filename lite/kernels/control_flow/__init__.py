"""Control flow: If, Loop and Scan run subgraphs of the model (their bodies), each compiled by the graph compiler
and planned like the main graph (`body.Body`)."""
