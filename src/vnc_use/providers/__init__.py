"""Model providers: each turns vnc-use's history into its model's request and the model's
answer into vnc-use's action vocabulary. One provider per package (``gemini``)."""
