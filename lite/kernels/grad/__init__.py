"""Gradient, loss and optimizer kernels of training graphs, one module per forward op family (`<forward>_grad.py`);
`lite.kernels.MODULES` imports each when its op is looked up."""
