"""Replies the real embedded model gave instead of a fill (browser tour s4, N-M2 and n5; the
Paper-protocol run of bench/bench_fill_checks.py), and fills raters should see, several of
them sentences about help, models or texts: the cases both chat-reply rules are tested on."""

CHAT_REPLIES = [
    "I'm ready to help. What's your next question?",
    "I'm ready to help. What's the text you'd like me to assist with?",
    "You are asked to fill in the blank in the text.",
    "Your answer must contain exactly 3 bullet points",
    "SmolLM.",
    "This text requires me to replace the missing words that match with",
    "Here's a reorganized version of the given text with only",
    "I'm ready to assist you. Please go ahead and fill",
    "Sure! Here is the missing text: the fields",
    "I'm sorry, but I cannot help with that.",
    "I'm sorry for the misunderstanding, but as a text-based AI, I can't directly provide",
    "The text does not contain the missing words.",
    "Reply:",
    'This is a blank space to replace "These groups" with "These groups"',
    "You are correct in your interpretation of the text. The sentence should be replaced with:",
    "Alright, just just for reference, I will add the missing words to the text.",
    "Your request is too vague. I can help you fill in the blank.",
    "The text needs to be reworded with only the missing words to make it concise and clear.",
    "I am an AI designed to assist you with your personal tasks.",
    "That's a great summary of the article. Here's a breakdown of the text and the edits:",
    "*Syntactically incorrect (no missing words)",
    "The text can be reformatted using Markdown to display the requested characters.",
]
FILLS = [
    "Tokyo",
    "The Amazon is expected to lose a fifth of its trees by 2050.",
    "He bought a cookbook and a set of new pans.",
    "She became an assistant professor at Yale in 1962.",
    "The model of the bridge was shown at the fair.",
    "They were ready to help the farmers with the harvest.",
    "Here the river turns east.",
    "However, only around a third of his original output has survived.",
    "They are thought to have migrated from Siberia to Alaska.",
    "The process of neutralizing a weak acid with a strong base is well known.",
    "Aristotle would call the collecting of the donation a result of chance.",
    "I cannot imagine a world without music, she wrote.",
    "Light crosses empty space in about eight minutes.",
]
