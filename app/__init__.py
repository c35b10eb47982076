"""The Gradio app: thin layer over magnet_model (model work) and annotation_db (storage).

main.py puts the page together and starts the server; handlers.MagnetApp is what its events
call, put together from one module per area: demo.py (Infill with the blind vote, Continue,
Search, laid out in demo_page.py), admin/ (the Admin tab, one file per concern, laid out in
admin/page.py), rater.py (the rater's page, laid out in rater_page.py), all on
services.py (the process's engine, store and limits; Unavailable; user_errors; input checks)
and, for the two that run the model, model_calls.py (each comparison as one GPU call).
"""
