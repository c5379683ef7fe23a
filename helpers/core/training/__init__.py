"""The scikit-learn estimator both optimizers derive from: its fit and what a fitted one offers.

The parameters they share, minibatches, the losses of an epoch, what keeps a fit
consistent when it stops early. It may import every other part of :mod:`helpers.core`.
"""
