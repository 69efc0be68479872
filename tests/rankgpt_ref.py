"""A transcription of RankGPT's permutation generation (github.com/sunnweiwei/RankGPT, rank_gpt.py at 0d62bc3):
get_prefix_prompt, get_post_prompt, create_permutation_instruction, clean_response, remove_duplicate,
receive_permutation, permutation_pipeline and sliding_windows, written here from reading that file. It imports
nothing of r2med_eval. The one change: the LLM call (run_llm) is a function the test passes in, which gets the
messages and returns the model's answer; the hard-coded passage cut (max_length = 300 words) is a parameter."""
import copy


def get_prefix_prompt(query, num):
    return [{'role': 'system',
             'content': "You are RankGPT, an intelligent assistant that can rank passages based on their relevancy "
                        "to the query."},
            {'role': 'user',
             'content': f"I will provide you with {num} passages, each indicated by number identifier []. \nRank the "
                        f"passages based on their relevance to query: {query}."},
            {'role': 'assistant', 'content': 'Okay, please provide the passages.'}]


def get_post_prompt(query, num):
    return (f"Search Query: {query}. \nRank the {num} passages above based on their relevance to the search query. "
            f"The passages should be listed in descending order using identifiers. The most relevant passages should "
            f"be listed first. The output format should be [] > [], e.g., [1] > [2]. Only response the ranking "
            f"results, do not say any word or explain.")


def create_permutation_instruction(item=None, rank_start=0, rank_end=100, max_length=300):
    query = item['query']
    num = len(item['hits'][rank_start: rank_end])
    messages = get_prefix_prompt(query, num)
    rank = 0
    for hit in item['hits'][rank_start: rank_end]:
        rank += 1
        content = hit['content']
        content = content.replace('Title: Content: ', '')
        content = content.strip()
        content = ' '.join(content.split()[:int(max_length)])
        messages.append({'role': 'user', 'content': f"[{rank}] {content}"})
        messages.append({'role': 'assistant', 'content': f'Received passage [{rank}].'})
    messages.append({'role': 'user', 'content': get_post_prompt(query, num)})
    return messages


def clean_response(response: str):
    new_response = ''
    for c in response:
        if not c.isdigit():
            new_response += ' '
        else:
            new_response += c
    new_response = new_response.strip()
    return new_response


def remove_duplicate(response):
    new_response = []
    for c in response:
        if c not in new_response:
            new_response.append(c)
    return new_response


def receive_permutation(item, permutation, rank_start=0, rank_end=100):
    response = clean_response(permutation)
    response = [int(x) - 1 for x in response.split()]
    response = remove_duplicate(response)
    cut_range = copy.deepcopy(item['hits'][rank_start: rank_end])
    original_rank = [tt for tt in range(len(cut_range))]
    response = [ss for ss in response if ss in original_rank]
    response = response + [tt for tt in original_rank if tt not in response]
    for j, x in enumerate(response):
        item['hits'][j + rank_start] = copy.deepcopy(cut_range[x])
        if 'rank' in item['hits'][j + rank_start]:
            item['hits'][j + rank_start]['rank'] = cut_range[j]['rank']
        if 'score' in item['hits'][j + rank_start]:
            item['hits'][j + rank_start]['score'] = cut_range[j]['score']
    return item


def permutation_pipeline(item=None, rank_start=0, rank_end=100, run_llm=None, max_length=300):
    messages = create_permutation_instruction(item=item, rank_start=rank_start, rank_end=rank_end,
                                              max_length=max_length)
    permutation = run_llm(messages)
    item = receive_permutation(item, permutation, rank_start=rank_start, rank_end=rank_end)
    return item


def sliding_windows(item=None, rank_start=0, rank_end=100, window_size=20, step=10, run_llm=None, max_length=300):
    item = copy.deepcopy(item)
    end_pos = rank_end
    start_pos = rank_end - window_size
    while start_pos >= rank_start:
        start_pos = max(start_pos, rank_start)
        item = permutation_pipeline(item, start_pos, end_pos, run_llm=run_llm, max_length=max_length)
        end_pos = end_pos - step
        start_pos = start_pos - step
    return item


def run_retriever_content(raw):
    """The content of one hit as run_retriever builds it from pyserini's raw document (a dict)."""
    content = raw
    if 'title' in content:
        content = 'Title: ' + content['title'] + ' ' + 'Content: ' + content['text']
    else:
        content = content['contents']
    content = ' '.join(content.split())
    return content
