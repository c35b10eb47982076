"""The Gradio app: thin layer over magnet_model (model work) and annotation_db (storage)."""
