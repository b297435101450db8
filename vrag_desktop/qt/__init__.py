"""Qt layer of VRAG Desktop (PySide6 + qasync): renders core state and forwards user intent."""
