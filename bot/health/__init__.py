"""Training health, pure: the alert rules over a run's metrics (`rules`), and what alerts, progress and ETA say
(`render`). The watcher runs them on what its tick listed (bot.watch.health) and the card shows them."""
