"""Network I/O for the client: the socket side of the sans-IO `ClientConnection`."""
