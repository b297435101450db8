"""The Ask panel and the controller that runs an agent for it."""
