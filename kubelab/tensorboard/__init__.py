"""TensorBoard: supervised sessions (`supervisor`), their CLI (`cli`), and the event files
the local runner writes from reported metrics (`tfevents`).

Kept free of imports: the runner imports `tfevents` without TensorBoard's session code.
"""
